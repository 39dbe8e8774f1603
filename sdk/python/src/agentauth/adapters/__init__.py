"""Optional adapters that give agentauth's tool catalog to agent frameworks.

Each module imports its framework when it is used, so none is a dependency
of ``agentauth``: install the extra (``agentauth[openai-agents]``,
``agentauth[langchain]``).
"""

/** The SDK's version: the project's (VERSION at the repository root), checked by a unit test. */
export const VERSION = "0.21.0";

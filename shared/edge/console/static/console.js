// agentauth console: small progressive enhancement. Every page works
// without it; with it, times read in the viewer's zone, destructive forms
// ask first, and a running turn's timeline follows its events live.
(function () {
  'use strict';
  function localTimes(root) {
    var fmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
    root.querySelectorAll('time[datetime]').forEach(function (t) {
      var d = new Date(t.getAttribute('datetime'));
      if (!isNaN(d)) t.textContent = fmt.format(d);
    });
  }
  document.addEventListener('DOMContentLoaded', function () {
    localTimes(document);
    document.querySelectorAll('form[data-confirm]').forEach(function (f) {
      f.addEventListener('submit', function (e) {
        if (!window.confirm(f.getAttribute('data-confirm'))) e.preventDefault();
      });
    });
    var main = document.getElementById('main');
    var list = document.getElementById('timeline');
    var live = main && main.getAttribute('data-live');
    if (!live || !list || !window.EventSource) return;
    var url = live + '?after=' + encodeURIComponent(list.getAttribute('data-last') || '0');
    var es = new EventSource(url);
    es.addEventListener('entry', function (e) {
      var seq = Number(e.lastEventId);
      if (list.querySelector('li[data-seq="' + seq + '"]')) return; // never twice
      var tpl = document.createElement('template');
      tpl.innerHTML = e.data.trim();
      var li = tpl.content.firstElementChild;
      if (!li) return;
      localTimes(li);
      list.appendChild(li);
      list.setAttribute('data-last', String(seq));
    });
    es.addEventListener('ended', function () {
      es.close();
      window.location.reload();
    });
  });
})();

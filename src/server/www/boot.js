// boot.js - a classic script that runs before the viewer's modules load: when their graph
// could not be fetched (a load aborted, e.g. because the browser's network changed), the page
// is loaded again, five times at most, instead of staying on "connecting".
(function () {
  var mod = document.querySelector('script[type=module]');
  if (!mod) return;
  mod.addEventListener('error', function () {
    var n = Number(sessionStorage.getItem('sbx-view-reloads') || 0);
    if (n < 5) {
      sessionStorage.setItem('sbx-view-reloads', String(n + 1));
      setTimeout(function () { location.reload(); }, 300 * (n + 1));
      return;
    }
    document.body.dataset.state = 'error';
    document.getElementById('status').textContent = 'cannot load the viewer (reload the page)';
  });
})();

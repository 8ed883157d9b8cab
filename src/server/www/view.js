// view.js - the live desktop of one sandbox: noVNC (Debian's novnc package, served by
// `sbx serve` at /desktop/novnc/) over the WebSocket /v1/sandboxes/{id}/desktop/vnc.
//
// The page is /desktop/view/{id}#token=T. The view token T (POST
// /v1/sandboxes/{id}/desktop/view, with the API key) travels in the URL's fragment, which the
// browser never sends, and then as a WebSocket subprotocol (`sbx-token.T`), so it appears in
// no request line, log or Referer.
import RFB from '/desktop/novnc/core/rfb.js';

const state = (s, text) => {
  document.body.dataset.state = s;
  document.getElementById('status').textContent = text;
};

const id = decodeURIComponent(location.pathname.split('/').pop());
const hash = new URLSearchParams(location.hash.slice(1));
const token = hash.get('token') || '';
document.getElementById('sandbox').textContent = id;

if (!/^[0-9a-f]{64}$/.test(token)) {
  state('error', 'no view token: open the URL that `sbx desktop view` prints');
} else {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = `${scheme}//${location.host}/v1/sandboxes/${encodeURIComponent(id)}/desktop/vnc`;
  const rfb = new RFB(document.getElementById('screen'), url,
                      { wsProtocols: ['binary', `sbx-token.${token}`] });
  rfb.scaleViewport = true;
  rfb.viewOnly = hash.get('view_only') === '1';
  rfb.addEventListener('connect', () => {
    sessionStorage.removeItem('sbx-view-reloads');
    state('connected', 'connected');
  });
  rfb.addEventListener('disconnect', (e) =>
    state('disconnected', e.detail.clean ? 'disconnected' : 'connection lost'));
  rfb.addEventListener('securityfailure', (e) =>
    state('error', `refused: ${e.detail.reason || e.detail.status}`));
  window.sbxView = rfb; // for tests and the console
}

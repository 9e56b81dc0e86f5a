/* Agent Lab — behaviour every page shares, as a static file: the pages carry no inline script
 * (Content-Security-Policy: script-src 'self').
 *   form[data-confirm]  asks before it submits (e.g. deleting a conversation)
 */
(function () {
  "use strict";
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
  });
})();

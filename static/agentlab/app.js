/* Agent Lab — behaviour every page shares, as a static file: the pages carry no inline script
 * (Content-Security-Policy: script-src 'self').
 *   form[data-confirm]  asks before it submits (e.g. deleting a conversation)
 *   [data-show-all=id]  unclamps the element #id (a long question as a heading) and back
 */
(function () {
  "use strict";
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
  });
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-show-all]");
    const target = button && document.getElementById(button.dataset.showAll);
    if (!target) return;
    const open = target.classList.toggle("clamped") === false;
    button.setAttribute("aria-expanded", String(open));
    if (!button.dataset.label) button.dataset.label = button.textContent;
    button.textContent = open ? "show less" : button.dataset.label;
  });
})();

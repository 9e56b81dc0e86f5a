/* The admin's agent form (agentlab/agent_form.py): of the parameter fieldsets, one per
 * paradigm, show only the chosen paradigm's. A static file: the admin has a CSP too. */
(function () {
  "use strict";
  function update(select) {
    document.querySelectorAll("fieldset.paradigm-params").forEach((set) => {
      set.style.display = set.classList.contains("paradigm-" + select.value) ? "" : "none";
    });
  }
  document.addEventListener("DOMContentLoaded", () => {
    const select = document.getElementById("id_paradigm");
    if (!select) return;
    select.addEventListener("change", () => update(select));
    update(select);
  });
})();

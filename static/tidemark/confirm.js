// Forms with data-confirm ask before they submit; "{field}" in the text is replaced by that field's value,
// so the question names what the action undoes (e.g. the instant a rollback removes).
(function () {
  "use strict";
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    const text = form.dataset.confirm.replace(/\{(\w+)\}/g, (_, name) =>
      (form.elements[name] && form.elements[name].value) || name);
    if (!window.confirm(text)) event.preventDefault();
  });
})();

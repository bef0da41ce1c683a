// Forms with data-confirm ask before they submit; "{field}" in the text is replaced by that field's value
// (a select's chosen option text when its value is empty, else the field's data-empty), so the question names
// what the action undoes (e.g. the instant a rollback removes). data-confirm-unless names a checkbox that,
// checked, makes the action harmless (a dry run): then nothing is asked.
(function () {
  "use strict";
  function shown(field, name) {
    if (!field) return name;
    if (field.value) return field.value;
    const option = field.selectedOptions && field.selectedOptions[0];
    return (option && option.text) || field.dataset.empty || name;
  }
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    const unless = form.dataset.confirmUnless && form.elements[form.dataset.confirmUnless];
    if (unless && unless.checked) return;
    const text = form.dataset.confirm.replace(/\{(\w+)\}/g, (_, name) => shown(form.elements[name], name));
    if (!window.confirm(text)) event.preventDefault();
  });
})();

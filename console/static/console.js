// Small conveniences; every page works without them (the server checks everything).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Forget: say beside the form whether the confirmation matches (the server decides).
  const user = document.getElementById("forget-user");
  const confirm = document.getElementById("forget-confirm");
  if (user && confirm) {
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.setAttribute("aria-live", "polite");
    confirm.insertAdjacentElement("afterend", hint);
    const check = () => {
      hint.textContent = !confirm.value ? "" :
        confirm.value === user.value ? "Matches: the user will be forgotten." : "Does not match the user id.";
    };
    user.addEventListener("input", check);
    confirm.addEventListener("input", check);
  }
  // A chosen MEMORY.md line takes the keyboard focus, so Tab goes on from there.
  const chosen = document.querySelector("ol.memory li.chosen a");
  if (chosen) chosen.focus({ preventScroll: true });
});

// Renders the equations that pymdownx.arithmatex (generic mode) leaves in the page: \( ... \) inline and \[ ... \]
// display, each inside an element of class "arithmatex". KaTeX is bundled under vendor/katex (MIT licence), so the
// pages render their equations offline; nothing is fetched from a CDN.
(function () {
  function render(root) {
    if (!window.katex) {
      return;
    }
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      var tex = el.textContent.trim();
      var display = tex.startsWith("\\[");
      if (tex.startsWith("\\(") || display) {
        tex = tex.slice(2, -2);
      }
      try {
        katex.render(tex, el, { displayMode: display, throwOnError: false });
      } catch (err) {
        el.classList.add("arithmatex-error");
      }
    });
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { render(document.body); });  // mkdocs-material's page-change stream
  } else {
    document.addEventListener("DOMContentLoaded", function () { render(document.body); });
  }
})();

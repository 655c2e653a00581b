// Long qualified names in page titles (tensorplay.cuda.graphs.CUDAGraph) break after their
// dots, not inside a name: a <wbr> follows each dot of the title's text (docs/design.md, "Docs
// site"). The stylesheet's overflow-wrap: anywhere still breaks a name longer than the line.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".bd-article h1").forEach((title) => {
    const walker = document.createTreeWalker(title, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    texts.forEach((text) => {
      const parts = text.data.split(".");
      if (parts.length < 2) return;
      const pieces = document.createDocumentFragment();
      parts.forEach((part, index) => {
        if (index) pieces.append(".", document.createElement("wbr"));
        pieces.append(part);
      });
      text.replaceWith(pieces);
    });
  });
});

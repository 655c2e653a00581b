// Long qualified names in page titles (tensorplay.cuda.graphs.CUDAGraph) break after their
// dots and underscores, not inside a word: a <wbr> follows each of them in the title's text
// (docs/design.md, "Docs site"). The stylesheet's overflow-wrap: anywhere still breaks a word
// longer than the line.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".bd-article h1").forEach((title) => {
    const walker = document.createTreeWalker(title, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    texts.forEach((text) => {
      const parts = text.data.split(/(?<=[._])/);  // each part ends at a dot or underscore
      if (parts.length < 2) return;
      const pieces = document.createDocumentFragment();
      parts.forEach((part, index) => {
        if (index) pieces.append(document.createElement("wbr"));
        pieces.append(part);
      });
      text.replaceWith(pieces);
    });
  });
});

"""Sphinx configuration of the docs site; build it with `python docs/build.py`, which adds the
pages rendered from api.yaml (codegen/site.py) before Sphinx runs."""
project = "tensorplay"
copyright = "the TensorPlay authors"
release = "0.1.0"

extensions = ["myst_parser"]
# colon_fence: the generated pages fence directives with ::: so that a doc may hold a code
# fence; fieldlist: :param x: lines in a description become Sphinx's parameter lists.
myst_enable_extensions = ["colon_fence", "fieldlist"]
# Headings get anchors to the third level, so that links such as design.md#capture-rules work.
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}

# Every cross-reference must resolve: with nitpicky, an unresolved one is a warning, and the
# build treats warnings as errors (docs/design.md, "Docs site").
nitpicky = True
# Signatures name schema classes fully (codegen/site.py); show the short name.
python_use_unqualified_type_names = True

html_theme = "pydata_sphinx_theme"
html_title = "tensorplay"
html_theme_options = {"navbar_align": "left"}
# No source links or "last updated" stamps: the output depends on the sources alone.
html_show_sourcelink = False
html_copy_source = False
# The site's source view of api.yaml and the runtime files the pages link (codegen/site.py,
# Note [Examples and sources]), published at the root as source/<file>.html.
html_extra_path = ["_extra"]
# The layout fixes of docs/_static/tensorplay.css: titles and signatures wrap, wide tables
# scroll, the page's table of contents wraps its long names (docs/design.md, "Docs site");
# tensorplay.js lets titles break after the dots of their qualified names.
html_static_path = ["_static"]
html_css_files = ["tensorplay.css"]
html_js_files = ["tensorplay.js"]
# A signature longer than this puts each parameter on a line of its own.
python_maximum_signature_line_length = 88

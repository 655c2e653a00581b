"""The benchmarks' harness: what the area scripts in bench/ share (baselines.py: the raw CUDA C
baselines of bench/raw/, the timing helpers, records and command line), the report's runner
(report.py) and its renderer (render_report.py).

The area scripts run as `python bench/SCRIPT.py`, so bench/ is first on sys.path and they import
`harness.baselines`; report.py and render_report.py run as `python bench/harness/SCRIPT.py`,
and render_report.py imports its siblings by their own names.
"""

"""Results -> numbers -> pages: which results, their groups and comparisons, the charts, the
rendered page, and two runs compared.

selection.py   which stored results a report takes
grouping.py    repeats of one measurement together; speedups, effects, checks
headtohead.py  environment against environment: the page's lead, cards, the ladder
scaling.py     data-parallel scaling and the light models
hardware.py    hardware named by what bench measured; labels checked against it
reference.py   the write-up's figures, shown as a reference
charts.py      matplotlib figures as inline SVG
formats.py     numbers, bytes and money as the page writes them
templating.py  Jinja2 for the HTML and the Markdown
csvfile.py     results.csv
pages.py       index.html, summary.md and results.csv
compare.py     two runs, cell by cell: only the changes that clear the noise
"""

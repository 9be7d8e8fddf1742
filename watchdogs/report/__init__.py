"""`watchdogs report`: one self-contained HTML page drawn from the state database
(data.py gathers, svg.py draws, html.py renders and writes)."""

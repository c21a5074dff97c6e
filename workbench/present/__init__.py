"""Presentation helpers shared by every layer: N/A values, units, HTML
tables and figures. They import nothing of the workbench but each other."""

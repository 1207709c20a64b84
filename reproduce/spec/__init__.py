"""Specification: what the study is — profiles, the arms of every paper, the claims and their loader, the papers'
published numbers, the label map, where the files are and the Markdown table format. No training, no run cache."""

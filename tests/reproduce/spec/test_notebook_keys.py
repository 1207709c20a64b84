"""The notebook scan finds the raw metric keys a notebook's outputs show, not those in its sources."""

from __future__ import annotations

import nbformat
import pytest

from reproduce.spec import labels, notebook_keys


def test_raw_metric_keys_in_a_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("df[['cs100_i2t_true', 'rsum']]")  # sources are not scanned
    code.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": "<table><tr><th>cs100_i2t_true</th><th>RSUM (sum …) ↑</th></tr></table>",
                "text/plain": "   cs100_i2t_true\n0  0.4",
            },
        ),
        nbformat.v4.new_output("stream", name="stdout", text="best: mapr_i2t_expert=3.1 seed=0 arm=BCLS\n"),
    ]
    clean = nbformat.v4.new_code_cell("x")
    clean.outputs = [
        nbformat.v4.new_output("execute_result", data={"text/plain": labels.label("ncs5_t2i_sbert")}, execution_count=1)
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("We report `expert_kendall_nongt`."), code, clean]
    path = tmp_path / "fixture.ipynb"
    nbformat.write(nb, path)
    assert notebook_keys.raw_metric_keys_in(path) == ["cs100_i2t_true", "mapr_i2t_expert"]
    clean_nb = nbformat.v4.new_notebook(cells=[clean])
    nbformat.write(clean_nb, tmp_path / "clean.ipynb")
    assert notebook_keys.raw_metric_keys_in(tmp_path / "clean.ipynb") == []
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(ValueError, match="bad.ipynb"):
        notebook_keys.raw_metric_keys_in(tmp_path / "bad.ipynb")

"""Jupyter server settings of ``scripts/lab.sh`` (``make lab``), loaded with ``--config``.

Notebooks under ``notebooks/`` are the study's sources: Lab saves them (autosave included) through
nbstripout, without outputs, execution counts, widget state, run timings or the kernel's version details,
so running one in Lab leaves the file as committed unless a cell's source changed, and ``git status``
stays clean. Outputs stay visible in the open tab; the executed copies live under ``results/notebooks/``.
Other notebooks (``results/``, your own elsewhere) are saved as they are.
"""

# keys nbstripout removes by default (its command line's list), plus what a kernel fills into language_info
STRIPPED_KEYS = [
    "metadata.signature",
    "metadata.widgets",
    "cell.metadata.collapsed",
    "cell.metadata.ExecuteTime",
    "cell.metadata.execution",
    "cell.metadata.heading_collapsed",
    "cell.metadata.hidden",
    "cell.metadata.scrolled",
    *(
        f"metadata.language_info.{k}"
        for k in ("codemirror_mode", "file_extension", "mimetype", "nbconvert_exporter", "pygments_lexer", "version")
    ),
]
SOURCE_FOLDER = "notebooks/"


def strip_source_notebooks(model, path, **kwargs):
    """Jupyter's ``pre_save_hook``: strip a notebook saved under ``notebooks/`` (``path`` is relative to the
    server's root, the repository)."""
    if model.get("type") != "notebook" or not path.lstrip("/").startswith(SOURCE_FOLDER):
        return
    import nbformat
    from nbstripout import strip_output

    model["content"] = strip_output(
        nbformat.from_dict(model["content"]),
        keep_output=False,
        keep_count=False,
        keep_id=True,
        extra_keys=STRIPPED_KEYS,
    )


c = get_config()  # noqa: F821 — defined by traitlets when it loads this file
c.ContentsManager.pre_save_hook = strip_source_notebooks

"""Floor 4, editing: ``update`` is the one home of moving a batch (keep the global batch,
re-solve the accumulation for a new world or split, edit the job and read it back), with the
other files of a job it moves (``update_files``), the byte-exact text edits (``text_edits``)
and rendering into an existing folder (``render_into``). Rendering a spec is
:mod:`translator.render` (a public import path)."""

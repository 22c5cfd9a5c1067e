"""The bottom of what a framework may use: the contract it meets (:mod:`.contract`), the
registry that finds every framework by its entry point (:mod:`.registry`), what an inspection
of a file is (:mod:`.inspection`), the findings a reader raises for a file a job names that
is not there or a value ``update`` cannot edit (:mod:`.findings`), and the opening of such a
file, found and read or said to be unknown (:mod:`.job_files`). Nothing here imports a
framework; a plugin imports from here and from the core's vocabulary (spec, reading, findings).
"""

"""The I/O layer below both the pipeline runner and the Spark engine: change records and
their positions (:mod:`.records`), the file formats that hold them (:mod:`.formats`),
turning records into table changes (:mod:`.apply`), the dead-letter file, and the sinks a
view is delivered to (:mod:`.sinks`).  Values are spelled by the value layer
(:mod:`upkeep.codecs`), so each format and sink means the same on every engine.
"""

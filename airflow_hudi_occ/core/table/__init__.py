"""A Hudi table as it is on storage: ``hoodie.properties``, the timeline and the file-system view."""

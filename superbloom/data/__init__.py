"""data/: raw links -> a prepared dataset (readers, prepare, out-of-core prepare, the writer, vocabularies); no torch."""

"""The max-margin programs: the NTP-SVM in every norm behind one result type, and uniqueness of their minimizers."""

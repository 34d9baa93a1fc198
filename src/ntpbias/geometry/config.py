"""The names the geometry layer accepts, for the configs that choose among them (importing no torch)."""

#: The backends of the NTP-SVM and its relatives (:meth:`ntpbias.geometry.margins.program.MarginProgram.solve`).
SOLVERS = ("auto", "clarabel", "dual", "workset", "ipm")
#: The norms, in the order of reports and of ``ntpbias analyze --norms`` (:mod:`.norms`).
NORMS = ("l2", "linf", "l1", "spectral", "nuclear")

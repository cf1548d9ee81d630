"""Widgets and blocks the pages share, one module per job: text (:mod:`.text`), the budget slider
(:mod:`.budget`), solver pickers and options (:mod:`.solvers`), results at the budget (:mod:`.metrics`),
tables whose empty cells say why (:mod:`.table`), rows of figures that wrap on a narrow screen
(:mod:`.rows`), a job's progress with Cancel and Retry (:mod:`.jobs`),
the sidebar (:mod:`.sidebar`), the lifetime chart's controls (:mod:`.lifetime`), decompositions
(:mod:`.decompositions`), runs on real tensors (:mod:`.tensor_run`) and downloads (:mod:`.exports`)."""

"""Long work off the app's thread, as jobs: a job and where it stands (:mod:`.job`), a lane of one worker
process of the worker layer (:mod:`remat_core.batch.worker`) and its queue, with Cancel, supersede and stall
detection (:mod:`.lane`), the server's lanes (:mod:`.lanes`), the tasks the workers run (:mod:`.tasks`, no
Streamlit), jobs submitted and their results kept by key, and "fits at" (:mod:`.results`), and waiting for a
solve on a page (:mod:`.waiting`)."""

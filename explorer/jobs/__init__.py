"""Long work off the app's thread, as jobs: a job and where it stands (:mod:`.job`), a lane of one worker
process and its queue (:mod:`.lane`, the worker's loop in :mod:`.process`), the server's lanes
(:mod:`.runner`), the jobs themselves (:mod:`.worker`, no Streamlit), results kept by key and "fits at"
(:mod:`.results`), and waiting for a solve on a page (:mod:`.waiting`)."""

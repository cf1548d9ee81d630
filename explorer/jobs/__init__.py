"""Long work off the app's thread: worker processes (:mod:`.runner`), the jobs they run (:mod:`.worker`,
no Streamlit), the results kept by key (:mod:`.results`), and waiting for one on a page (:mod:`.waiting`)."""

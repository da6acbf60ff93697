"""Files on disk: atomic writes and built-once folders (files.py), the run folder and its one
owner (run_folder.py), bounded JSON (bounded_json.py), code-free `.npy` reading (pickled_npy.py)
and memoised file hashes (file_hashes.py)."""

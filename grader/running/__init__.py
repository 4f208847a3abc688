"""Running student code: a fresh child process (isolation) inside the sandbox (sandbox, exec_walls,
landlock, memory_cgroup, limits, child_env), its submission's files (submission_files), the caches
its compilers share (compile_cache, triton_key, kept), one GPU shared between gradings (gpu_lock,
overlap), the machine it all runs on (environment, stack), and a Ctrl-C held where it cannot be
taken cleanly (ctrl_c). The child's own side is grader/child/."""

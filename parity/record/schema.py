"""The results file's version and the names it gives what it writes beside itself."""

# 2: rows carry 'dtype' and 'tuned'; a training row's first epoch is 'first_epoch_s' only ('compile_s' null)
# 3: raw times and memory; 4: a row's kind is 'kind' (was 'workload'), a comparison's pair 'pair' (was 'kind'); a row's
# setting's environment is 'setting_env', 'config_env' in files written before the name changed (read as either)
SCHEMA_VERSION = 4
OLDEST_SCHEMA = 1  # the oldest version report and compare still read
PROFILES = "profiles"  # under --out: one folder of traces per profiled row (--profile)

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| svc_fuzz::repository(data));

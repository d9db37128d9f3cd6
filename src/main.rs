fn main() {
    // lapin parses and writes AMQP frames on a thread of its own ("lapin-io-loop") with the
    // default stack, and amq-protocol's parser recurses once per level of a nested header:
    // about 5 KiB a level unoptimised, so a legal 10 KB header 5,000 levels deep overflowed
    // 2 MiB and aborted Warren before any of its own code saw the message. lapin offers no
    // setting for that thread's stack; the standard library gives threads started without a
    // size `RUST_MIN_STACK`. A header frame is at most `MAX_FRAME`, 256 KiB (≈ 52,000 levels),
    // which needs < 512 MiB; the space is reserved, not used, until a deep header arrives. Warren's own
    // threads ask for their size explicitly (`cli::main`).
    if std::env::var_os("RUST_MIN_STACK").is_none() {
        // SAFETY: nothing else runs yet: this is the first statement of `main`, before any
        // thread is started, so no other thread can read the environment concurrently.
        unsafe {
            std::env::set_var(
                "RUST_MIN_STACK",
                warren::broker::amqp::DEEP_STACK.to_string(),
            )
        };
    }
    std::process::exit(warren::cli::main());
}

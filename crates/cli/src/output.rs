//! Printing that cannot panic. `outln!` and `errln!` panic when the stream is gone (a
//! closed pipe such as `signet admin token list | head -1`, a full disk); a command's output
//! that cannot be written is dropped, and the exit code still tells what happened.

/// `outln!` that drops what stdout cannot take.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `errln!` that drops what stderr cannot take.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `print!` that drops what stdout cannot take (the lab's progress lines).
#[cfg(feature = "lab")]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout().lock();
        let _ = write!(o, $($arg)*);
        let _ = o.flush();
    }};
}

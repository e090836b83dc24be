use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match portcullis::cmdline::parse(&argv) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(1);
        }
    };
    if args.version > 0 {
        println!(
            "portcullis version {} - HAProxy-compatible load balancer",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::SUCCESS;
    }
    if args.check_only {
        let rc = portcullis::config::check_command(&args.files, args.quiet);
        return ExitCode::from(u8::try_from(rc).unwrap_or(1));
    }
    eprintln!("[ALERT]    (1) : no configuration parser yet");
    ExitCode::from(1)
}

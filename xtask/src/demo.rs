pub fn run(_args: &[String]) -> crate::util::Result {
    Err("not yet".into())
}

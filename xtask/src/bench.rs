pub fn run(_a: &[String]) -> crate::util::Result {
    Err("todo".into())
}

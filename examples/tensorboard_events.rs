//! Writes a TensorBoard event file with known values, for the TensorBoard peer test
//! (tests/peer/peer_tensorboard.py reads it back with TensorBoard's own reader).
//! `cargo run --example tensorboard_events -- DIR`

use mlagents::train::tensorboard::SummaryWriter;

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "tb-events".into());
    let mut writer = SummaryWriter::create(std::path::Path::new(&dir))?;
    for step in 1..=5i64 {
        writer.add_scalar("Environment/Cumulative Reward", step as f32 * 1.5, step * 12000)?;
        writer.add_scalar("Policy/Learning Rate", 3.0e-4, step * 12000)?;
    }
    writer.add_histogram("Simple/Return Histogram", &[1.0, 2.0, 2.0, 3.0, 10.0], 60000)?;
    writer.flush()?;
    println!("{}", writer.path().display());
    Ok(())
}

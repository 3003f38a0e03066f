mod common;
use mlagents::env::ActionTuple;
use rand::SeedableRng;

#[test]
fn basic_smoke() {
    let mut env = common::start("Basic");
    env.reset().unwrap();
    let names = env.behavior_names();
    assert_eq!(names, vec!["Basic?team=0"]);
    let spec = env.behavior_specs()["Basic?team=0"].clone();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut ends = 0;
    for _ in 0..300 {
        let (d, t) = env.get_steps("Basic?team=0").unwrap();
        ends += t.len();
        env.set_actions("Basic?team=0", ActionTuple::random(&spec.action_spec, &d, &mut rng)).unwrap();
        env.step().unwrap();
    }
    assert!(ends > 0);
    env.close().unwrap();
}

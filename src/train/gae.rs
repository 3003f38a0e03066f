//! Returns and advantages (training.md §7): generalised advantage estimation inside one
//! trajectory, bootstrapped from the value of the next observation unless the episode truly
//! ended; and the buffer-wide standardisation of advantages done once per update.

/// Advantages and returns of one trajectory for one reward signal.
/// `values[t]` = V(s_t); `bootstrap` = V(next_obs), ignored when `terminal` (a real episode
/// end, not an interruption or a time-horizon cut).
pub fn gae(rewards: &[f32], values: &[f32], bootstrap: f32, terminal: bool, gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
    let n = rewards.len();
    assert_eq!(values.len(), n, "one value per reward");
    let mut advantages = vec![0.0; n];
    let mut next_value = if terminal { 0.0 } else { bootstrap };
    let mut running = 0.0;
    for t in (0..n).rev() {
        let delta = rewards[t] + gamma * next_value - values[t];
        running = delta + gamma * lambda * running;
        advantages[t] = running;
        next_value = values[t];
    }
    let returns = advantages.iter().zip(values).map(|(a, v)| a + v).collect();
    (advantages, returns)
}

/// Standardises advantages over a whole update buffer: (A - mean) / (population std + 1e-10).
pub fn standardize(advantages: &mut [f32]) {
    if advantages.is_empty() {
        return;
    }
    let n = advantages.len() as f64;
    let mean = advantages.iter().map(|a| *a as f64).sum::<f64>() / n;
    let std = (advantages.iter().map(|a| (*a as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
    for a in advantages.iter_mut() {
        *a = ((*a as f64 - mean) / (std + 1e-10)) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: gamma 0.5, lambda 1 (plain discounted returns minus values).
    #[test]
    fn matches_a_hand_computation() {
        let (adv, ret) = gae(&[1.0, 0.0, 2.0], &[0.5, 0.5, 0.5], 4.0, false, 0.5, 1.0);
        // Returns: r2 + 0.5*4 = 4; r1 + 0.5*4 = 2; r0 + 0.5*2 = 2.
        assert_eq!(ret, vec![2.0, 2.0, 4.0]);
        assert_eq!(adv, vec![1.5, 1.5, 3.5]);
        let (_, terminal) = gae(&[1.0, 0.0, 2.0], &[0.5, 0.5, 0.5], 4.0, true, 0.5, 1.0);
        assert_eq!(terminal, vec![1.5, 1.0, 2.0], "a real episode end does not bootstrap");
    }

    #[test]
    fn lambda_zero_is_one_step_td() {
        let (adv, _) = gae(&[1.0, 1.0], &[2.0, 3.0], 5.0, false, 0.9, 0.0);
        assert!((adv[0] - (1.0 + 0.9 * 3.0 - 2.0)).abs() < 1e-6);
        assert!((adv[1] - (1.0 + 0.9 * 5.0 - 3.0)).abs() < 1e-6);
    }

    #[test]
    fn standardisation_uses_the_population_std() {
        let mut a = vec![1.0, 3.0];
        standardize(&mut a);
        assert!((a[0] + 1.0).abs() < 1e-6 && (a[1] - 1.0).abs() < 1e-6, "{a:?}");
    }
}

//! Minimal 3-D vectors and quaternions with Unity's conventions (y up; `q * v` rotates `v`;
//! `Rotate(axis, deg)` in self space is `q = q * AngleAxis(deg, axis)`).

use std::ops::{Add, Mul, Neg, Sub};

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Vec3 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

impl Vec3 {
    pub const fn new(x: f32, y: f32, z: f32) -> Self {
        Self { x, y, z }
    }

    pub fn dot(self, o: Self) -> f32 {
        self.x * o.x + self.y * o.y + self.z * o.z
    }

    pub fn cross(self, o: Self) -> Self {
        Self::new(self.y * o.z - self.z * o.y, self.z * o.x - self.x * o.z, self.x * o.y - self.y * o.x)
    }
}

impl Add for Vec3 {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self::new(self.x + o.x, self.y + o.y, self.z + o.z)
    }
}

impl Sub for Vec3 {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Self::new(self.x - o.x, self.y - o.y, self.z - o.z)
    }
}

impl Mul<f32> for Vec3 {
    type Output = Self;
    fn mul(self, k: f32) -> Self {
        Self::new(self.x * k, self.y * k, self.z * k)
    }
}

impl Neg for Vec3 {
    type Output = Self;
    fn neg(self) -> Self {
        Self::new(-self.x, -self.y, -self.z)
    }
}

/// A unit quaternion (x, y, z, w) as Unity stores it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quat {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub w: f32,
}

impl Quat {
    pub const IDENTITY: Self = Self { x: 0.0, y: 0.0, z: 0.0, w: 1.0 };

    /// `Quaternion.AngleAxis(degrees, axis)` for a unit axis.
    pub fn angle_axis(degrees: f32, axis: Vec3) -> Self {
        let half = degrees.to_radians() * 0.5;
        let s = half.sin();
        Self { x: axis.x * s, y: axis.y * s, z: axis.z * s, w: half.cos() }
    }

    /// `transform.Rotate(axis, degrees)` in self space.
    pub fn rotate_self(self, axis: Vec3, degrees: f32) -> Self {
        (self * Self::angle_axis(degrees, axis)).normalized()
    }

    pub fn normalized(self) -> Self {
        let n = (self.x * self.x + self.y * self.y + self.z * self.z + self.w * self.w).sqrt();
        if n == 0.0 {
            return Self::IDENTITY;
        }
        Self { x: self.x / n, y: self.y / n, z: self.z / n, w: self.w / n }
    }

    pub fn conjugate(self) -> Self {
        Self { x: -self.x, y: -self.y, z: -self.z, w: self.w }
    }

    /// Rotates a vector.
    pub fn rotate(self, v: Vec3) -> Vec3 {
        let u = Vec3::new(self.x, self.y, self.z);
        let t = u.cross(v) * 2.0;
        v + t * self.w + u.cross(t)
    }
}

impl Mul for Quat {
    type Output = Self;
    fn mul(self, r: Self) -> Self {
        Self {
            w: self.w * r.w - self.x * r.x - self.y * r.y - self.z * r.z,
            x: self.w * r.x + self.x * r.w + self.y * r.z - self.z * r.y,
            y: self.w * r.y - self.x * r.z + self.y * r.w + self.z * r.x,
            z: self.w * r.z + self.x * r.y - self.y * r.x + self.z * r.w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_about_z_turns_x_towards_y() {
        let q = Quat::IDENTITY.rotate_self(Vec3::new(0.0, 0.0, 1.0), 90.0);
        let v = q.rotate(Vec3::new(1.0, 0.0, 0.0));
        assert!((v.x).abs() < 1e-6 && (v.y - 1.0).abs() < 1e-6);
        let back = q.conjugate().rotate(v);
        assert!((back.x - 1.0).abs() < 1e-6);
    }
}

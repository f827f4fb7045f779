pub struct Calc { total: i64 }

pub trait Named { fn name(&self) -> String; }

impl Calc {
    pub fn new() -> Self { Calc { total: 0 } }
    pub fn add(&mut self, n: i64) -> i64 { self.total += n; self.total }
}

impl<T> Wrapper<T> { fn get(&self) -> &T { &self.0 } }

enum Op { Add, Sub }

macro_rules! twice { ($e:expr) => { $e * 2 }; }

fn main() { let mut c = Calc::new(); c.add(2); }

//! What one request's work shares, in the Worker and in a session object alike: the bindings and
//! the D1 cost meter.

use crate::d1::{self, D1Exec, Meter};
use sema_core::store::SqlStore;
use std::rc::Rc;
use worker::Env;

pub struct Cx {
    pub env: Env,
    pub meter: Rc<Meter>,
}

impl Cx {
    pub fn new(env: Env) -> Self {
        Self {
            env,
            meter: Rc::new(Meter::default()),
        }
    }

    /// The run store, charging this request's meter.
    pub fn store(&self) -> Result<SqlStore<D1Exec>, worker::Error> {
        d1::store(&self.env, &self.meter)
    }
}

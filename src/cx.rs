//! What one request's work shares, in the Worker and in a session object alike: the bindings and
//! the D1 cost meter.

use crate::d1::{self, D1Exec, Meter};
use sema_core::store::SqlStore;
use std::rc::Rc;
use worker::Env;

pub struct Cx {
    pub env: Env,
    pub meter: Rc<Meter>,
    /// The Worker request's context, for work after the response (`waitUntil`); absent in objects
    /// and the cron, which await such work instead.
    context: Option<Rc<worker::Context>>,
}

impl Cx {
    pub fn new(env: Env) -> Self {
        Self {
            env,
            meter: Rc::new(Meter::default()),
            context: None,
        }
    }

    /// A Worker request's: work handed to [`Cx::after_response`] outlives the response.
    pub fn for_request(env: Env, context: worker::Context) -> Self {
        Self {
            context: Some(Rc::new(context)),
            ..Self::new(env)
        }
    }

    /// Runs `work` after the response when this is a Worker request, else now.
    pub async fn after_response<F: std::future::Future<Output = ()> + 'static>(&self, work: F) {
        match &self.context {
            Some(c) => c.wait_until(work),
            None => work.await,
        }
    }

    /// The run store, charging this request's meter.
    pub fn store(&self) -> Result<SqlStore<D1Exec>, worker::Error> {
        d1::store(&self.env, &self.meter)
    }
}

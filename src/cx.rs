//! What one request's work shares, in the Worker and in a session object alike: the bindings and
//! the D1 cost meter, and the test-only failpoints armed for it (`failpoint.rs`; none by default).

use crate::{
    d1::{self, D1Exec, Meter},
    failpoint::{self, Armed},
};
use sema_core::store::SqlStore;
use std::rc::Rc;
use worker::Env;

pub struct Cx {
    pub env: Env,
    pub meter: Rc<Meter>,
    /// The Worker request's context, for work after the response (`waitUntil`); absent in objects
    /// and the cron, which await such work instead.
    context: Option<Rc<worker::Context>>,
    /// Failpoints armed for this call: none unless the deployment enables them (tests only).
    pub fail: Armed,
}

impl Cx {
    pub fn new(env: Env) -> Self {
        Self {
            fail: Armed::from_env(&env, None),
            env,
            meter: Rc::new(Meter::default()),
            context: None,
        }
    }

    /// Arms the failpoint a call names in its [`failpoint::HEADER`] (honoured only when the
    /// deployment enables failpoints by header).
    pub fn armed_by(mut self, req: &worker::Request) -> Self {
        if !failpoint::by_header(&self.env) {
            return self;
        }
        let name = req.headers().get(failpoint::HEADER).ok().flatten();
        if name.is_some() {
            self.fail = Armed::from_env(&self.env, name);
        }
        self
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

//! What one request's work shares, in the Worker and in a session object alike: the bindings, the
//! store's cost meter, the call's hold on the store of record (`store_backend.rs`: for PostgreSQL
//! its one connection, opened on first use and closed when the Cx is dropped), and the test-only
//! failpoints armed for it (`failpoint.rs`; none by default).

use crate::{
    d1::Meter,
    failpoint::{self, Armed},
    store_backend::{self, Link, StoreExec},
};
use sema_core::store::SqlStore;
use std::rc::Rc;
use worker::Env;

pub struct Cx {
    pub env: Env,
    pub meter: Rc<Meter>,
    /// The store of record this call reaches (at most one PostgreSQL connection per Cx).
    link: Link,
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
            link: Link::new(&env),
            env,
            meter: Rc::new(Meter::default()),
            context: None,
        }
    }

    /// Arms the failpoint a call names in its [`failpoint::HEADER`] (honoured only when the
    /// deployment enables failpoints by header).
    pub fn armed_by(self, req: &worker::Request) -> Self {
        if !failpoint::by_header(&self.env) {
            return self;
        }
        let name = req.headers().get(failpoint::HEADER).ok().flatten();
        self.armed_with(name)
    }

    /// Arms the failpoint an RPC call forwarded (as [`Cx::armed_by`], under the same rule).
    pub fn armed_with(mut self, name: Option<String>) -> Self {
        if name.is_some() && failpoint::by_header(&self.env) {
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

    /// The run store over the configured backend, charging this request's meter. Every store of
    /// one Cx shares its link (so one connection at most).
    pub fn store(&self) -> Result<SqlStore<StoreExec>, worker::Error> {
        store_backend::store(&self.env, &self.link, &self.meter)
    }
}

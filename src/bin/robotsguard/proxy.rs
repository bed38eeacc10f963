//! robotsguard's own proxy: every `ProxyHttp` hook hands over to the library's [`Guard`], as an
//! embedding proxy's would, so the binary and embedders cannot drift apart.

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use robotsguard::guard::{Guard, GuardContext};

/// The proxy: the guard decides, routes and answers; this type only wires its hooks.
pub struct RobotsGuardProxy {
    pub guard: Guard,
}

#[async_trait]
impl ProxyHttp for RobotsGuardProxy {
    type CTX = GuardContext;

    fn new_ctx(&self) -> GuardContext {
        GuardContext::new()
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut GuardContext) -> Result<bool> {
        self.guard.request_filter(session, ctx).await
    }

    async fn request_body_filter(
        &self,
        session: &mut Session,
        _body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        self.guard.request_body_filter(session, end_of_stream, ctx)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut GuardContext,
    ) -> Result<Box<HttpPeer>> {
        self.guard.upstream_peer(ctx)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut GuardContext,
        e: Box<Error>,
    ) -> Box<Error> {
        self.guard.fail_to_connect(ctx, e)
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        self.guard
            .upstream_request_filter(session, upstream_request, ctx)
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        _response: &mut ResponseHeader,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        self.guard.upstream_response_filter(ctx);
        Ok(())
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut GuardContext,
    ) -> Result<()> {
        self.guard.response_filter(session, response, ctx)?;
        self.guard.response_headers(response, ctx);
        Ok(())
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut GuardContext,
    ) -> Result<Option<std::time::Duration>> {
        self.guard.response_body_filter(body, end_of_stream, ctx);
        Ok(None)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut GuardContext,
    ) -> FailToProxy
    where
        Self::CTX: Send + Sync,
    {
        self.guard.fail_to_proxy(session, e, ctx).await
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &GuardContext, _e: &Error) -> bool {
        // pingora's own line for each failure holds client text and is not rate-limited;
        // Guard::fail_to_proxy logs through the limiter instead.
        true
    }

    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut GuardContext) {
        self.guard.logging(session, ctx);
    }
}

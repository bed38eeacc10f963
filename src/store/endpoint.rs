//! Where the shared store's commands go: one server, the primary Redis Sentinel names now, or a
//! Redis/Valkey Cluster; one connection type for the rest of the store whichever it is.
//!
//! A sentinel is asked for the primary at every connection, so a failover reaches robotsguard
//! the way any lost connection does: the background check reconnects and finds the new one.

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection, PubSub};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::config::RedisClient;

/// A connection to the store, cheap to clone (both kinds multiplex).
#[derive(Clone)]
pub(super) enum StoreConnection {
    /// To one server: a single store, or the primary a sentinel named.
    Single(MultiplexedConnection),
    /// To a cluster: each command goes to the node holding its keys' slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for StoreConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            StoreConnection::Single(c) => c.req_packed_command(cmd),
            StoreConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            StoreConnection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            StoreConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            StoreConnection::Single(c) => c.get_db(),
            StoreConnection::Cluster(c) => c.get_db(),
        }
    }
}

/// The store's client, by topology.
pub(super) enum Endpoint {
    Single(redis::Client),
    /// The sentinel client asks the sentinels in turn; it keeps connections to them, hence the
    /// lock (only the background loop connects).
    Sentinel(tokio::sync::Mutex<redis::sentinel::SentinelClient>),
    Cluster {
        cluster: Box<redis::cluster::ClusterClient>,
        nodes: Vec<redis::Client>,
    },
}

impl Endpoint {
    pub(super) fn new(client: RedisClient) -> Endpoint {
        match client {
            RedisClient::Single(client) => Endpoint::Single(*client),
            RedisClient::Sentinel(client) => Endpoint::Sentinel(tokio::sync::Mutex::new(*client)),
            RedisClient::Cluster { cluster, nodes } => Endpoint::Cluster { cluster, nodes },
        }
    }

    /// Whether keys that one script or pipeline uses together must share a hash slot.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Endpoint::Cluster { .. })
    }

    /// A new connection: to the server, to the primary the sentinels name now, or to the cluster.
    pub(super) async fn connect(
        &self,
        connect_timeout: Duration,
        response_timeout: Duration,
        in_flight: usize,
    ) -> redis::RedisResult<StoreConnection> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout))
            .set_concurrency_limit(in_flight);
        match self {
            Endpoint::Single(client) => client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map(StoreConnection::Single),
            Endpoint::Sentinel(sentinel) => {
                let primary = sentinel.lock().await.async_get_client().await?;
                primary
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(StoreConnection::Single)
            }
            Endpoint::Cluster { cluster, .. } => cluster
                .get_async_connection()
                .await
                .map(StoreConnection::Cluster),
        }
    }

    /// A connection for subscribing: to the server, to the primary (where the scripts publish),
    /// or to the first cluster node that answers (a cluster relays every publication to all of
    /// its nodes).
    pub(super) async fn pubsub(&self) -> redis::RedisResult<PubSub> {
        match self {
            Endpoint::Single(client) => client.get_async_pubsub().await,
            Endpoint::Sentinel(sentinel) => {
                let primary = sentinel.lock().await.async_get_client().await?;
                primary.get_async_pubsub().await
            }
            Endpoint::Cluster { nodes, .. } => {
                let mut last = None;
                for node in nodes {
                    match node.get_async_pubsub().await {
                        Ok(pubsub) => return Ok(pubsub),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| {
                    redis::RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "no cluster node to subscribe at",
                    ))
                }))
            }
        }
    }
}
